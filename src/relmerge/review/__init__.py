"""Human clarification: remembered answers, the review queue, and clarifier providers."""
