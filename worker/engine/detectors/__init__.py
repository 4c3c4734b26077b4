"""Detectors beside the per-host segment table.

pagelevel, isotonic, train, commands: the page-level templateness model (Chakrabarti,
Kumar, Punera) that judges a host's first pages from the page alone; see docs/pagelevel.md.
"""
