"""The data model's modules; :mod:`cupellation._model` gathers their public names."""
