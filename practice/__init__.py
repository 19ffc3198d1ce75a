"""The practice room's server side: seeded demo owners, their agents and a one-time login."""
