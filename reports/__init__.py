"""HTML reports from result files (pandas, plotly, jinja2; never torch)."""
