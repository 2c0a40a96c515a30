from .compiler import ASTSource, compile, make_backend  # noqa: F401
