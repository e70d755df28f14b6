"""Reading runs back: harness anatomy (analysis, SVG, Table 2), figures, tables, Panel dashboards (dash/), notebook
batches and experiment helpers. See README.md in this folder; nothing is imported here (pandas, holoviews and
panel load inside the functions that use them)."""
