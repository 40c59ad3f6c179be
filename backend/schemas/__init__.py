"""Wire models, the API <-> dashboard contract, one module per resource (common: what they share). Undefined
values are `null`, never 0; fields may be added, never renamed; time series are columnar (one list per field,
aligned with `t`): what plotly wants, and small JSON."""
