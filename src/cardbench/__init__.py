"""cardbench: honest speed, label and capacity tests for flash cards, USB sticks and card readers."""

__version__ = "0.1.0"
