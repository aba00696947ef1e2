"""Discrete choices in any exported model: which reach which outputs, how close they come to ties, and the
proven cause of every mismatch."""
