/* Accessibility patches for Dash 4's dcc components, whose props cannot name their inner controls:
   - a <label for=X> names the slider thumb(s) and number input inside the dcc component with id X
     (dcc.Slider renders them inside a wrapper div, so the label's `for` alone names nothing);
   - the dropdown's hidden focus-target input (aria-hidden) is taken out of the tab order;
   - a table wider than its box (.table-responsive scrolls sideways on a phone) can be focused and scrolled
     with the keyboard.
   Runs on every DOM change (Dash renders pages after load). */
(function () {
  function patch() {
    document.querySelectorAll('label[for]').forEach(function (label) {
      var host = document.getElementById(label.htmlFor);
      if (!host || /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(host.tagName)) { return; }
      var name = label.textContent.trim();
      host.querySelectorAll('[role=slider], input:not([type=hidden]):not(.dash-dropdown-focus-target)')
        .forEach(function (el) {
          if (!el.getAttribute('aria-label')) { el.setAttribute('aria-label', name); }
        });
    });
    document.querySelectorAll('.table-responsive:not([tabindex])').forEach(function (el) {
      el.setAttribute('tabindex', '0');
      el.setAttribute('role', 'region');
      el.setAttribute('aria-label', 'table (scrolls sideways)');
    });
    document.querySelectorAll('.dash-dropdown-focus-target:not([tabindex="-1"])').forEach(function (el) {
      el.setAttribute('tabindex', '-1');
    });
  }
  var pending = false;
  new MutationObserver(function () {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; patch(); });
  }).observe(document.documentElement, {childList: true, subtree: true});
  document.addEventListener('DOMContentLoaded', patch);
})();
