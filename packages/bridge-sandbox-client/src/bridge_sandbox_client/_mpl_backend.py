"""A matplotlib backend: Agg rendering; ``plt.show()`` sends the open figures to the host.

Selected through ``MPLBACKEND=module://bridge_sandbox_client._mpl_backend``.
"""

from __future__ import annotations

from typing import Any

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

from bridge_sandbox_client._display import active

__all__ = ["FigureCanvas", "FigureManager", "show"]

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args: Any, **kwargs: Any) -> None:
    """Send every open figure as a PNG ``Display`` frame, then close them."""
    displayer = active()
    if displayer is not None:
        displayer.send_open_figures()
