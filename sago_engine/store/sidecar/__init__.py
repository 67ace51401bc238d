"""Files kept beside a store, never in it: the API reply cache and the hand labels of mirroring-judge calls."""
