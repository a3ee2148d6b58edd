"""What a person sees: report.md, the terminal summary, plots and progress."""
