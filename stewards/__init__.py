"""The operator's side of Synapsia: exit notes, the aggregate dashboard and abuse reports.

The operator (whoever runs the service) sees exit-note themes in aggregate and abuse reports in
full where a party to the room filed one; never a private room's content otherwise
(docs/operator.md).
"""
