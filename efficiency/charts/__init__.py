"""Pure chart builders: plain data in, a Plotly figure out. No Django imports here."""
