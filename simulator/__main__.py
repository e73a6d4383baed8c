"""`python -m trainsignals.simulator ...` runs `trainsignals simulate`."""

from .cli import simulate

if __name__ == "__main__":
    simulate(prog_name="python -m trainsignals.simulator")
