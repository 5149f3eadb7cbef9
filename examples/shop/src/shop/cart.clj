(ns shop.cart
  "A shopping cart: items, totals and a receipt."
  (:require [clojure.string :as str]
            [shop.money :as money :refer [format-cents]]))

(def ^:dynamic *tax-rate* 8)

(defn line-total
  "Price times quantity of one cart line."
  [{:keys [price qty] :or {qty 1}}]
  (* price qty))

(defn subtotal [items]
  (reduce + (map line-total items)))

(defn total
  "Subtotal plus tax, in cents."
  [items]
  (let [s (subtotal items)]
    (+ s (quot (* s *tax-rate*) 100))))

(defn receipt
  "A printable receipt."
  [items]
  (str/join "\n"
            (concat (for [{:keys [name] :as item} items]
                      (str name " " (format-cents (line-total item))))
                    [(str "TOTAL " (money/format-cents (total items)))])))

(defn print-receipt! [items]
  (println (receipt items)))

(comment
  (def items [{:name "tea" :price (money/cents 3 50) :qty 2}])
  (print-receipt! items))
