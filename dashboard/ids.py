"""Component ids, unique app-wide: shared ones, then one prefix per page."""

from __future__ import annotations

# shared (app.layout)
URL = "url"
URL_SOFT = "url-soft"  # same browser URL; setting its search does not re-render the page
NAV_LINKS = "nav-links"
NAV_MENU, NAV_MENU_LINKS = "nav-menu", "nav-menu-links"  # the page menu on a phone
WINDOW_SELECT = "window-select"
WINDOW_PICK = "window-pick"  # the control's choice when the server must act on it (dashboard.in_place)
CUSTOM_BOX = "window-custom-box"
WINDOW_BOX = "window-box"  # the window control: shown only on the pages that read the window
WINDOW_PATHS = "window-paths"  # those pages' paths (a store the browser's callback reads)
CUSTOM_START = "window-custom-start"
CUSTOM_END = "window-custom-end"
CUSTOM_APPLY = "window-custom-apply"
REFRESH_SELECT = "refresh-select"
REFRESH_PAUSE = "refresh-pause"
REFRESH_INTERVAL = "refresh-interval"
REFRESH_STATE = "refresh-state"
THEME_SWITCH = "theme-switch"
THEME_STORE = "theme-store"

# overview
OV_QUERY = "ov-query"
OV_STATUS = "ov-status"
OV_KPIS = "ov-kpis"
OV_GRID = "ov-grid"
OV_CARDS = "ov-cards"  # the overview on a phone: one card per row
OV_FILTER = "ov-filter"
OV_RETRY = "ov-retry"
OV_NARROW = "ov-narrow"
OV_PAGE = "ov-page"  # {"offset", "q"}: the page of a fleet larger than overview.PAGE_ROWS
OV_PAGER = "ov-pager"
OV_PAGER_TEXT = "ov-pager-text"
OV_PREV = "ov-prev"
OV_NEXT = "ov-next"
OV_ENGINE = "ov-engine"  # the engine filter: all, or one engine

# per-domain acceptance
AC_QUERY = "ac-query"
AC_MODEL = "ac-model"
AC_MODE = "ac-mode"
AC_STATUS = "ac-status"
AC_KPIS = "ac-kpis"
AC_CHART = "ac-chart"
AC_TAU_CHART = "ac-tau-chart"
AC_RETRY = "ac-retry"

# model drill-down
MD_QUERY = "md-query"
MD_MODEL = "md-model"
MD_CLASS = "md-class"
MD_MODE = "md-mode"
MD_STATUS = "md-status"
MD_KPIS = "md-kpis"
MD_POSITION = "md-position"
MD_BAND = "md-band"
MD_ITL = "md-itl"
MD_TPOT = "md-tpot"
MD_SPEEDUP = "md-speedup"
MD_RETRY = "md-retry"
MD_KADVICE = "md-kadvice"
MD_CAPACITY = "md-capacity"
MD_REPLICAS = "md-replicas"

# calculator
CA_ALPHA = "ca-alpha"
CA_K = "ca-k"
CA_EPS = "ca-eps"
CA_MIX_SHARE = "ca-mix-share"
CA_MIX_ALPHA2 = "ca-mix-alpha2"
CA_STATUS = "ca-status"
CA_KPIS = "ca-kpis"
CA_CURVE = "ca-curve"
CA_MIX = "ca-mix"

# rollout status (owned by rollout)
RO_STATUS = "ro-status"
RO_RETRY = "ro-retry"
RO_MODEL = "ro-model"
RO_TRACKS = "ro-tracks"
RO_EVENTS = "ro-events"
RO_FORM_SCOPE = "ro-form-scope"
RO_FORM_ACTION = "ro-form-action"
RO_FORM_REASON = "ro-form-reason"
RO_FORM_TOKEN = "ro-form-token"
RO_FORM_SUBMIT = "ro-form-submit"
RO_FORM_RESULT = "ro-form-result"

# weekly report
RP_WEEK = "rp-week"
RP_STATUS = "rp-status"
RP_BODY = "rp-body"
RP_EXPORT_MD = "rp-export-md"
RP_EXPORT_CSV = "rp-export-csv"
RP_EXPORT_PDF = "rp-export-pdf"
RP_DOWNLOAD = "rp-download"

# rollout plan
PL_MODEL = "pl-model"
PL_K = "pl-k"
PL_TRAFFIC = "pl-traffic"
PL_CONCURRENCY = "pl-concurrency"
PL_ALPHA = "pl-alpha"
PL_SUBMIT = "pl-submit"
PL_STATUS = "pl-status"
PL_OUTPUT = "pl-output"

# drafter / configuration A/B
CP_MODEL = "cp-model"
CP_A = "cp-a"
CP_B = "cp-b"
CP_AT = "cp-at"
CP_WINDOW = "cp-window"
CP_SUBMIT = "cp-submit"
CP_EXPORT = "cp-export"
CP_DOWNLOAD = "cp-download"
CP_STATUS = "cp-status"
CP_BODY = "cp-body"
