"""A stand-in for magnum.common.exception with the behaviour oslo.messaging relies on.

A Python Magnum client re-raises a failure from this module as `Class(*args, **kwargs)`.
The classes here follow upstream's contract for that (a class-level `code`, `kwargs`
kept with `code` added when absent, the message %-formatted with the kwargs), so the
interop tests show that the failures magnum-rs sends rebuild into the right exception and
HTTP code. Only the classes the tests use are defined.
"""


class MagnumException(Exception):
    message = "An unknown exception occurred."
    code = 500

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        self.kwargs.setdefault("code", self.code)
        template = message if message else self.message
        # Upstream formats even a given message; a stray '%' would break it.
        self.message = template % kwargs
        super().__init__(self.message)

    def __str__(self):
        return self.message


class Invalid(MagnumException):
    code = 400


class InvalidParameterValue(Invalid):
    message = "%(err)s"


class NotSupported(MagnumException):
    message = "%(operation)s is not supported."
    code = 400


class ObjectNotFound(MagnumException):
    message = "The %(name)s %(id)s could not be found."
    code = 404


class ResourceNotFound(ObjectNotFound):
    pass


class ClusterNotFound(ResourceNotFound):
    message = "Cluster %(cluster)s could not be found."


class Conflict(MagnumException):
    message = "Conflict."
    code = 409
