"""Use cases, one module per command family: they compose the layers below (matrix, resolve, image,
lock, engine …), return values and never print or exit; cli/ presents them. Threads and start-up tricks
live here, not in the domain modules."""
