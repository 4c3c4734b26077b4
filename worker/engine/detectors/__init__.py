"""The engine's detectors, one module each behind one interface (base.py; docs/engine.md).

segments.py   the segment table's vote (Wang et al.)
pagelets.py   pagelet min-hashes in the host's table (Bar-Yossef and Rajagopalan)
clusters.py   template clusters per host (TEXT-MDL's MinHash/LSH variants)
pagelevel.py  the page-level model (Chakrabarti, Kumar, Punera), with isotonic.py and data/pagelevel.json
"""
