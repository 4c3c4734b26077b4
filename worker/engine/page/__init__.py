"""The one page walk: HTML -> hostile-input guards -> lexbor tree -> blocks and cues."""
