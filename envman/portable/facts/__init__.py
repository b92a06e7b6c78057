"""IO that gathers facts about the machine. Every probe has a timeout; a failure is a fact, not a crash."""
