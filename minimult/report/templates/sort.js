// Click a heading of a table with class "sortable" to sort its rows by that column (again: reversed).
// Numbers sort as numbers (the part before "±" or "("), everything else as text.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.querySelectorAll("thead th");
  heads.forEach(function (th, col) {
    th.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0];
      var key = function (row) {
        var text = (row.cells[col] ? row.cells[col].textContent : "").trim();
        var n = parseFloat(text.split(/[±(]/)[0].replace(/,/g, ""));
        return isNaN(n) ? text.toLowerCase() : n;
      };
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { return typeof x === "number" ? -1 : 1; }
        return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
