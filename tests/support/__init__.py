"""What several test modules share: tiny models, stand-in servers, sample data (no test imports another)."""
