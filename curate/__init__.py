"""curate: find cognitive behaviors in text and build the datasets that teach them before RL."""

__version__ = "0.1.0"
