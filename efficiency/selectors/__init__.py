"""The read side: what each page and endpoint needs, already scoped to the user."""
