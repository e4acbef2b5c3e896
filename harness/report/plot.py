"""matplotlib, the `plot` extra: imported only where a picture is drawn, with one message where it is missing."""

MISSING = "needs matplotlib (the plot extra): pip install -e '.[plot]' (or pip install matplotlib)"


def available():
    """Whether matplotlib can be imported (bench and ci ask before a run that will draw)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pyplot(what="drawing"):
    """matplotlib.pyplot on the Agg backend (files only, no display), or SystemExit saying what needs it. Text is
    drawn as it is: labels come from solutions (scope names), and `$...$` must not be parsed as math (where it does
    not parse, saving raises)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit(f"{what} {MISSING}")
    if "text.parse_math" in matplotlib.rcParams:     # matplotlib >= 3.6
        matplotlib.rcParams["text.parse_math"] = False
    matplotlib.rcParams["text.usetex"] = False
    return plt
