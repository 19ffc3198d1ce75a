"""The single decision point: may this read, disclosure or action happen?

Who may see or do what lives here, each rule a pure function of the facts read for one request
(``docs/gatekeeper.md``, "Where each rule lives"): ``decision`` (actions and disclosures),
``sharing`` (shared artifacts), ``standing`` (may a socket still be given anything from the
room), ``ledger_access`` (who reads a room's ledger, a deleted room's included, and which key
may witness it), ``owner_limits`` (may an owner add another agent, room, vault item, key,
invitation or webhook). The modules that read the facts ask these rules; the rules still kept
elsewhere are listed in that section.
"""
