"""The doctor's pure core (stdlib only, so it also runs in an image): facts + knowledge -> findings."""
