"""SPD-Faith's labeling config (`labeling.xml`) and its record <-> task mapping (`tasks.py`)."""
