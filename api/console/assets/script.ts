// The console's only script, served as /console/assets/console.js. Progressive enhancement:
// every page works without it; with it, copy buttons appear next to secrets shown once. The
// buttons are rendered `hidden`, so a browser without JavaScript never shows one that does
// nothing.

export const CONSOLE_SCRIPT = `
'use strict';
document.querySelectorAll('[data-copy]').forEach(function (button) {
  var field = document.querySelector(button.getAttribute('data-copy'));
  if (!field) return;
  button.hidden = false;
  button.addEventListener('click', function () {
    var done = function () {
      button.textContent = 'Copied';
      setTimeout(function () { button.textContent = 'Copy'; }, 2000);
    };
    var fallback = function () {
      field.focus();
      field.select();
      try { document.execCommand('copy'); done(); } catch (error) { /* the field stays selected */ }
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(field.value).then(done, fallback);
    else fallback();
  });
});
document.querySelectorAll('input[data-select-on-focus]').forEach(function (field) {
  field.addEventListener('focus', function () { field.select(); });
});
`;
