// Settings: before the owner ever chose a time zone, offer the browser's own (Intl) zone:
// pre-select it in the list and say so; nothing is saved until they press Save.
(function () {
  "use strict";
  var offer = document.getElementById("zone-offer");
  var select = document.getElementById("id_time_zone");
  if (!offer || !select || offer.dataset.chosen !== "false") {
    return;
  }
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (error) {
    return;
  }
  var known = Array.prototype.some.call(select.options, function (option) {
    return option.value === zone;
  });
  if (!zone || !known || select.value === zone) {
    return;
  }
  select.value = zone;
  offer.textContent = "You have not chosen a time zone yet, so times are shown in UTC. " +
    "Your browser says you are in " + zone.replace(/_/g, " ") +
    ": it is selected below; press Save settings to use it.";
})();
