"""The command line: the only layer that parses argv, prints and exits."""
