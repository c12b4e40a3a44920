"""Engines that explore one System: the explicit explorer, the TLA+ emitter and the TLC runner."""
