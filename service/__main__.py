"""``python -m service --root CACHE --source-root DIR [--host H --port N --token T]``."""

from service.cli import serve

if __name__ == "__main__":
    serve(prog_name="python -m service")
