"""What the report and backtest pages share: human units, the Jinja2 environment, inline SVG, base template and CSS."""
