"""``python -m model_optimizer`` is the same as the ``mopt`` command."""

from model_optimizer.cli.main import app

if __name__ == "__main__":
    app(prog_name="mopt")
