"""perfcmp_core: the comparison engine of perfcmp-tui (loading, model, comparators, export,
advisor). It never imports Textual, so scripts and the headless ``export`` command stay light."""

__version__ = "0.1.0"
