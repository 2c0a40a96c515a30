# The application's own sitecustomize: kerncap's shim must chain to it.
import os

if os.environ.get("APP_SITE_MARKER"):
    open(os.environ["APP_SITE_MARKER"], "w").write("chained")
