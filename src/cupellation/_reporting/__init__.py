"""The SelectionReport and its fold; :mod:`cupellation._report` gathers their names."""
