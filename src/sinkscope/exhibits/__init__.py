"""One module per exhibit: the computation behind its table, figure and measured claims."""
