"""The store's read side: stored rows and page lists (browse), score queries, worst-case reads, and the filter → SQL condition they share (where)."""
