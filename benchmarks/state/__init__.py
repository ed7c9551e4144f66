"""What the state backends hold and cost: bytes per feedback and per link, Redis capacity,
restarts and resharding, and memory, SQLite and Redis under concurrent clients."""
