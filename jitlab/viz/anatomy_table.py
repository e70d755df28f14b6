"""Table 2 of the seed bank (harness x M/P/F/A, derived from code by jitlab.viz.anatomy) and one diagram per seed.

    from jitlab.viz.anatomy_table import save_diagrams, table, write_table
    write_table(table(), "figures")            # table2_seed_bank.md / .csv
    save_diagrams(out_dir="figures/anatomy")   # <name>.svg for every seed
    save_case_studies("figures/case_studies")  # <name>.svg for the paper's six case studies (not seeds)

``summary_row`` is also what ``jitlab harnesses`` prints per seed.
"""
from __future__ import annotations

from pathlib import Path

from jitlab.harness import case_study_names, seed_names
from jitlab.viz.anatomy import Anatomy, anatomy
from jitlab.viz.tables import markdown_table

__all__ = ["CASE_STUDY_CAPTION", "save_case_studies", "save_diagrams", "summary_row", "table", "write_table"]


def summary_row(folder: str | Path | Anatomy) -> dict:
    """One Table 2 row: name, the M/P/F/A labels, which slots call the backbone, which hooks exist."""
    a = folder if isinstance(folder, Anatomy) else anatomy(folder)
    return {"name": a.name, **{s: a.slots[s].label for s in "MPFA"},
            "calls_backbone": ", ".join(s for s, x in a.slots.items() if x.calls_backbone),
            "hooks": ", ".join(f"{h} ({'+'.join(slots)})" for h, slots in a.hooks.items() if slots)}


def table(folders=None):
    """Table 2 (harness x M/P/F/A) as a DataFrame; ``folders`` defaults to every seed in seed_bank/."""
    import pandas as pd
    rows = [summary_row(f) for f in (seed_names() if folders is None else folders)]
    return pd.DataFrame(rows, columns=["name", "M", "P", "F", "A", "calls_backbone", "hooks"])


def write_table(df, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``table2_seed_bank.md`` and ``table2_seed_bank.csv`` into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "table2_seed_bank.csv", out / "table2_seed_bank.md"
    df.to_csv(csv_path, index=False)
    md_path.write_text(markdown_table(df, empty="—") + "\n")
    return md_path, csv_path


def save_diagrams(folders=None, out_dir: str | Path = "figures/anatomy") -> list[Path]:
    """Write ``<out_dir>/<name>.svg`` for each harness (default: every seed); returns the paths."""
    return [(a := anatomy(f)).save(Path(out_dir) / f"{a.name}.svg")
            for f in (seed_names() if folders is None else folders)]


CASE_STUDY_CAPTION = ("The analogues of JIT-Agent's case-study figures (Figs. 7, 8, A.1-A.4): one SVG per case-study "
                      "harness in seed_bank/case_studies/ (not part of the seed bank B0), derived from its code by "
                      "jitlab.viz.anatomy.")


def save_case_studies(out_dir: str | Path = "figures/case_studies") -> list[Path]:
    """Write ``<out_dir>/<name>.svg`` for each case-study harness (``seed_bank/case_studies/``); returns the paths."""
    return save_diagrams(case_study_names(), out_dir)
