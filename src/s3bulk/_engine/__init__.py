"""Engines run a job's work items: the driver (`driver.py`) hands descriptors to workers
(`worker.py`) started by a launcher (`launch.py`, `ray_launch.py`) in the shape a strategy says
(`strategies.py`); they speak `messages.py`, and `dispatch.py` keeps the driver's books."""
