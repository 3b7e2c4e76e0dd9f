"""Help → Start here: the tour (guide.py), its stops (stops.py) and where its floating panel goes
(place.py)."""
