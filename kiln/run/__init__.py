"""The front's side of the slots, below HTTP and the judge alike: the pool of warm slots with its
admission queue (pool.py) and the Runner that runs a job in one (runner.py)."""
