(ns shop.money
  "Amounts of money as integer cents.")

(defn cents
  "Whole units and cents to cents."
  [units c]
  (+ (* 100 units) c))

(defn format-cents
  "Cents as a string like 12.05."
  [c]
  (format "%d.%02d" (quot c 100) (rem c 100)))

(defn- rounding-mode [] :half-up)
