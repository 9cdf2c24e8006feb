"""The event layer's modules; :mod:`cupellation.events` gathers their public names."""
