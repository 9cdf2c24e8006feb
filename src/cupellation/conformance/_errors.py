__all__ = ["VectorFailure"]


class VectorFailure(Exception):
    """A conformance vector's expectation did not hold; the message says which."""
