;; Ground truth for formdb's Clojure parser/resolver, computed by the real Clojure runtime.
;;
;;   clojure -cp "$(scripts/corpus.sh --classpath)" tests/clojure/ground_truth.clj CORPUS_DIR OUT.json
;;
;; For every .clj/.cljc file under CORPUS_DIR: its namespace, whether it loads, the vars the
;; runtime says were defined in it (name + line) and, per top-level form, the vars the form
;; refers to. The exact rules are in tests/clojure/README.md; keep both in sync.
(ns formdb.ground-truth
  (:require [clojure.string :as str])
  (:import (clojure.lang Compiler LineNumberingPushbackReader LispReader Namespace Symbol Var)
           (java.io File PrintStream OutputStream Writer)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files)))

(set! *warn-on-reflection* true)

;; ---------------------------------------------------------------------------------------------
;; Reader-generated symbols, recognised by identity.
;;
;; The reader builds `@x` as (clojure.core/deref x) and syntax-quote's expansion from static
;; Symbol objects of LispReader (clojure.core/seq, concat, list, apply, vector, hash-map,
;; hash-set, with-meta), and a template symbol as (quote ns/sym) with Compiler.QUOTE, while
;; 'x is (quote x) with LispReader.QUOTE and a typed (quote x) has a fresh symbol. These
;; objects survive nested syntax-quote, so they tell scaffolding from source text exactly.

(defn- static-field [^Class c ^String n]
  (let [f (.getDeclaredField c n)]
    (.setAccessible f true)
    (.get f nil)))

(def ^:private SEQ (static-field LispReader "SEQ"))
(def ^:private CONCAT (static-field LispReader "CONCAT"))
(def ^:private LIST (static-field LispReader "LIST"))
(def ^:private APPLY (static-field LispReader "APPLY"))
(def ^:private VECTOR (static-field LispReader "VECTOR"))
(def ^:private HASHMAP (static-field LispReader "HASHMAP"))
(def ^:private HASHSET (static-field LispReader "HASHSET"))
(def ^:private WITH-META (static-field LispReader "WITH_META"))
(def ^:private SQ-QUOTE (static-field Compiler "QUOTE"))

(def ^:private generated-syms
  "Symbols that only the reader writes: never refs."
  (into [SEQ CONCAT LIST APPLY VECTOR HASHMAP HASHSET WITH-META SQ-QUOTE]
        (map #(static-field LispReader %)
             ["QUOTE" "DEREF" "UNQUOTE" "UNQUOTE_SPLICING" "THE_VAR" "META"])))

(defn- generated? [x] (boolean (some #(identical? x %) generated-syms)))

(defn- scaffold-head? [x]
  (or (identical? x SEQ) (identical? x LIST) (identical? x APPLY) (identical? x WITH-META)
      (identical? x SQ-QUOTE)))

(def ^:private specials (set (keys Compiler/specials)))

;; ---------------------------------------------------------------------------------------------
;; Node tree: the read form, with syntax-quote expansions turned back into templates.
;;   {:t :seq|:vec|:map|:set, :items [node..], :meta node?}   (:map items are k v k v ...)
;;   {:t :sym, :sym s, :tmpl bool, :gen bool, :meta node?}    (:tmpl = written inside `...)
;;   {:t :lit, :v x}
;;   {:t :unq, :node node}                                     (~x / ~@x: ordinary code)

(declare conv template)

(defn- user-meta [x]
  (let [m (dissoc (meta x) :line :column)]
    (when (seq m) (conv m))))

(defn- coll-node [t items x]
  {:t t :items (mapv conv items) :meta (user-meta x)})

(defn conv
  "Ordinary code -> node."
  [x]
  (cond
    (symbol? x) {:t :sym :sym x :tmpl false :gen (generated? x) :meta (user-meta x)}
    (seq? x) (if (scaffold-head? (first x))
               (template x)
               (coll-node :seq x x))
    (vector? x) (coll-node :vec x x)
    (map? x) (coll-node :map (mapcat identity x) x)
    (set? x) (coll-node :set x x)
    :else {:t :lit :v x}))

(defn- template-or-code
  "The argument of a scaffolding (clojure.core/list X): a template piece or unquoted code."
  [x]
  (cond
    (and (seq? x) (scaffold-head? (first x))) (template x)
    (or (symbol? x) (coll? x)) {:t :unq :node (conv x)}
    :else {:t :lit :v x}))

(defn- concat-items
  "(clojure.core/seq (clojure.core/concat part...)) -> item nodes."
  [x]
  (let [[_ c] x]
    (if (and (seq? c) (identical? (first c) CONCAT))
      (vec (for [part (rest c)]
             (if (and (seq? part) (identical? (first part) LIST) (= 2 (count part)))
               (template-or-code (second part))
               {:t :unq :node (conv part)})))      ; ~@x
      [{:t :unq :node (conv x)}])))

(defn template
  "Syntax-quote expansion -> template node."
  [x]
  (let [h (first x)]
    (cond
      (identical? h SQ-QUOTE)
      (let [s (second x)]
        (if (symbol? s)
          {:t :sym :sym s :tmpl true :gen (generated? s) :meta nil}
          {:t :lit :v s}))

      (identical? h SEQ) {:t :seq :items (concat-items x) :meta nil}

      (identical? h LIST)                            ; `() and stray (list x...)
      {:t :seq :items (mapv template-or-code (rest x)) :meta nil}

      (identical? h APPLY)
      (let [[_ f arg] x
            t (cond (identical? f VECTOR) :vec (identical? f HASHMAP) :map
                    (identical? f HASHSET) :set)]
        (if (and t (seq? arg) (identical? (first arg) SEQ))
          {:t t :items (concat-items arg) :meta nil}
          (coll-node :seq x x)))

      (identical? h WITH-META)
      (let [[_ form m] x
            n (template-or-code form)]
        (assoc n :meta (template-or-code m)))

      :else (coll-node :seq x x))))

;; ---------------------------------------------------------------------------------------------
;; Locals: every symbol in a binding position anywhere in the top-level form.

(defn- hname
  "Name of a head symbol (reader-generated ones too: 'x is (quote x), @x is (deref x))."
  [node]
  (when (= :sym (:t node)) (name (:sym node))))

(defn- kw-lit [node] (when (and (= :lit (:t node)) (keyword? (:v node))) (:v node)))

(defn- add-local! [acc ^Symbol s]
  (when (and (nil? (namespace s)) (not= "&" (name s)))
    (vswap! acc conj (symbol (name s)))))

(defn- bind-lhs!
  "Destructuring LHS: all its symbols (not &), :keys/:strs/:syms names, :as, :or keys."
  [acc node]
  (case (:t node)
    :sym (when-not (:tmpl node) (add-local! acc (:sym node)))
    :vec (loop [[n & more] (:items node)]
           (when n
             (if (= :- (kw-lit n))                  ; schema-style [x :- Type]: skip Type
               (recur (rest more))
               (do (bind-lhs! acc n) (recur more)))))
    :map (doseq [[k v] (partition 2 (:items node))]
           (let [kw (kw-lit k)]
             (cond
               (and kw (#{"keys" "strs" "syms"} (name kw)))
               (doseq [n (:items v)]
                 (cond (= :sym (:t n)) (when-not (:tmpl n) (add-local! acc (symbol (name (:sym n)))))
                       (kw-lit n) (add-local! acc (symbol (name (kw-lit n))))))
               (= kw :as) (bind-lhs! acc v)
               (= kw :or) (doseq [[ok _] (partition 2 (:items v))] (bind-lhs! acc ok))
               kw nil
               :else (bind-lhs! acc k))))
    nil))

(defn- binding-vec! [acc node]
  (when (= :vec (:t node))
    (doseq [[lhs _] (partition 2 (:items node))]
      (let [kw (kw-lit lhs)]
        (cond (= kw :let) nil                       ; handled below
              kw nil                                ; :when / :while
              :else (bind-lhs! acc lhs))))
    (doseq [[lhs rhs] (partition 2 (:items node))]
      (when (= :let (kw-lit lhs)) (binding-vec! acc rhs)))))

(defn- fn-tail!
  "Params of a fn tail: the first vector, or the vector heading each arity list."
  [acc items]
  (let [items (drop-while #(not (#{:vec :seq} (:t %))) items)]
    (when-let [f (first items)]
      (if (= :vec (:t f))
        (bind-lhs! acc f)
        (doseq [a items :when (= :seq (:t a))
                :let [p (first (:items a))] :when (= :vec (:t p))]
          (bind-lhs! acc p))))))

(defn- method-params! [acc node]
  (when (= :seq (:t node))
    (fn-tail! acc (rest (:items node)))))

(def ^:private let-like
  #{"let" "let*" "loop" "loop*" "for" "doseq" "dotimes" "if-let" "when-let" "if-some" "when-some"
    "when-first" "with-open" "with-local-vars" "go-loop" "symbol-macrolet" "for-all"})
(def ^:private defn-like #{"defn" "defn-" "defmacro" "definline"})
(def ^:private def-names
  "Heads whose second element is the name being defined (anywhere in a form)."
  #{"def" "defn" "defn-" "defmacro" "defmulti" "defonce" "defprotocol" "defrecord" "deftype"
    "definterface" "defstruct" "definline"})

(defn- def-like-top?
  "At the top level, also any other def... macro (defnav, deftest, ...) except defmethod."
  [h top?]
  (or (def-names h) (and top? (str/starts-with? h "def") (not= h "defmethod"))))

(defn- unq-nodes
  "The unquoted-code nodes inside quoted data (only templates have any)."
  [node]
  (case (:t node)
    :unq [node]
    (:seq :vec :map :set) (mapcat unq-nodes (:items node))
    nil))

(defn- collect-locals! [acc node top?]
  (case (:t node)
    :unq (collect-locals! acc (:node node) false)
    (:sym :lit) (when-let [m (:meta node)] (collect-locals! acc m false))
    (:vec :map :set) (doseq [n (:items node)] (collect-locals! acc n false))
    :seq
    (let [items (:items node)
          h (hname (first items))
          tmpl? (:tmpl (first items))]
      (when (and h (not= h "quote"))
        (when-not tmpl?
          (cond
            (let-like h) (binding-vec! acc (nth items 1 nil))
            (#{"fn" "fn*"} h) (let [n (nth items 1 nil)]
                                (when (= :sym (:t n)) (bind-lhs! acc n))
                                (fn-tail! acc (rest items)))
            (= h "defmethod") (let [n (nth items 3 nil)]
                                (when (= :sym (:t n)) (bind-lhs! acc n))
                                (fn-tail! acc (drop 3 items)))
            (#{"letfn" "macrolet"} h) (doseq [spec (:items (nth items 1 nil))
                                              :when (= :seq (:t spec))]
                                        (bind-lhs! acc (first (:items spec)))
                                        (fn-tail! acc (rest (:items spec))))
            (= h "letfn*") (doseq [[n _] (partition 2 (:items (nth items 1 nil)))]
                             (bind-lhs! acc n))
            (= h "catch") (some->> (nth items 2 nil) (bind-lhs! acc))
            (= h "as->") (some->> (nth items 2 nil) (bind-lhs! acc))
            (#{"areduce" "amap"} h) (doseq [n (take 2 (drop 2 items))] (bind-lhs! acc n))
            (#{"deftype" "defrecord"} h) (do (some->> (nth items 2 nil) (bind-lhs! acc))
                                             (doseq [n (drop 3 items)] (method-params! acc n)))
            (#{"reify" "extend-type" "extend-protocol" "proxy"} h)
            (doseq [n (rest items)] (method-params! acc n))
            (#{"defprotocol" "definterface"} h)
            (doseq [sig (drop 2 items) :when (= :seq (:t sig))
                    p (:items sig) :when (= :vec (:t p))]
              (bind-lhs! acc p))
            (or (defn-like h) (and (def-like-top? h top?) (not (def-names h))))
            (fn-tail! acc (drop 2 items)))))
      (if (= h "quote")
        (doseq [u (unq-nodes node)] (collect-locals! acc u false))
        (do (when-let [m (:meta node)] (collect-locals! acc m false))
            (doseq [n items] (collect-locals! acc n false)))))))

;; ---------------------------------------------------------------------------------------------
;; Refs.

(def ^:dynamic ^Namespace *cur-ns* nil)

(defn- resolve-var [^Symbol s]
  (let [v (try (ns-resolve *cur-ns* s) (catch Throwable _ nil))]
    (when (instance? Var v)
      (let [^Var v v]
        (str (.name (.ns v)) "/" (.sym v))))))

(defn- ref-sym! [ctx node]
  (let [^Symbol s (:sym node)
        n (name s)]
    (when-not (:gen node)
      (if (:tmpl node)
        ;; template symbol: the reader already resolved it; only qualified ones can be vars
        (when (and (namespace s) (not (re-find #"__\d+__auto__$" n)))
          (when-let [r (resolve-var s)] (vswap! (:refs ctx) conj r)))
        (when-not (or (and (nil? (namespace s)) (contains? (:locals ctx) s))
                      (specials s)
                      (and (str/starts-with? n ".") (not= n ".."))
                      (and (str/ends-with? n ".") (not= n ".") (not= n "..")))
          (when-let [r (resolve-var s)] (vswap! (:refs ctx) conj r)))))))

(declare walk!)

(defn- walk-meta! [ctx node]
  (when-let [m (:meta node)]
    (if (= :map (:t m))
      (doseq [[k v] (partition 2 (:items m))]
        (when-not (= :tag (kw-lit k))                ; type hints (^objects, ^bytes, ...) are not refs
          (walk! ctx k false)
          (walk! ctx v false)))
      (walk! ctx m false))))

(defn- walk-unq-only!
  "Quoted data: only the unquoted code inside a template counts."
  [ctx node]
  (doseq [u (unq-nodes node)] (walk! ctx u false)))

(defn- walk-skip-sym!
  "A symbol that is a name, not a reference (defined name, method name): only its meta."
  [ctx node]
  (if (= :sym (:t node)) (walk-meta! ctx node) (walk! ctx node false)))

(defn- walk-method! [ctx node]
  (if (= :seq (:t node))
    (let [[h & more] (:items node)]
      (walk-meta! ctx node)
      (walk-skip-sym! ctx h)
      (doseq [n more] (walk! ctx n false)))
    (walk! ctx node false)))

(defn- walk-member!
  "Member of a (. target member) / (.. target member...) form: a method or field name."
  [ctx node]
  (case (:t node)
    :sym (walk-meta! ctx node)
    :seq (walk-method! ctx node)
    (walk! ctx node false)))

(defn walk! [ctx node top?]
  (case (:t node)
    :lit nil
    :unq (walk! ctx (:node node) false)
    :sym (do (ref-sym! ctx node) (walk-meta! ctx node))
    (:vec :map :set) (do (walk-meta! ctx node) (doseq [n (:items node)] (walk! ctx n false)))
    :seq
    (let [items (:items node)
          [hd a1 a2] items
          h (hname hd)
          walk-all! (fn [ns] (doseq [n ns] (walk! ctx n false)))]
      (walk-meta! ctx node)
      (cond
        (nil? h) (walk-all! items)
        ;; nested syntax-quote: the inner template's (quote ns/sym) is templated by the outer
        (and (identical? (:sym hd) SQ-QUOTE) (= :sym (:t a1)) (= 2 (count items)))
        (ref-sym! ctx a1)
        (= h "quote") (walk-unq-only! ctx node)
        (#{"ns" "declare" "import" "refer-clojure" "memfn"} h)
        (do (walk! ctx hd false) (doseq [n (rest items)] (walk-unq-only! ctx n)))
        (= h "case")
        (let [[e & clauses] (rest items)]
          (walk! ctx hd false)
          (when e (walk! ctx e false))
          (doseq [[t r :as pair] (partition-all 2 clauses)]
            (if (= 2 (count pair))
              (do (walk-unq-only! ctx t) (walk! ctx r false))
              (walk! ctx t false))))              ; default expression
        (= h ".")
        (do (walk! ctx hd false)
            (when a1 (walk! ctx a1 false))
            (when a2 (walk-member! ctx a2))
            (walk-all! (drop 3 items)))
        (= h "..")
        (do (walk! ctx hd false)
            (when a1 (walk! ctx a1 false))
            (doseq [n (drop 2 items)] (walk-member! ctx n)))
        (= h "proxy-super")
        (do (walk! ctx hd false) (when a1 (walk-skip-sym! ctx a1)) (walk-all! (drop 2 items)))
        (#{"deftype" "defrecord"} h)
        (do (walk! ctx hd false) (when a1 (walk-skip-sym! ctx a1))
            (when a2 (walk! ctx a2 false))
            (doseq [n (drop 3 items)] (walk-method! ctx n)))
        (#{"defprotocol" "definterface"} h)
        (do (walk! ctx hd false) (when a1 (walk-skip-sym! ctx a1))
            (doseq [n (drop 2 items)] (walk-method! ctx n)))
        (= h "reify")
        (do (walk! ctx hd false) (doseq [n (rest items)] (walk-method! ctx n)))
        (#{"extend-type" "extend-protocol"} h)
        (do (walk! ctx hd false) (when a1 (walk! ctx a1 false))
            (doseq [n (drop 2 items)] (walk-method! ctx n)))
        (= h "proxy")
        (do (walk! ctx hd false) (when a1 (walk! ctx a1 false)) (when a2 (walk! ctx a2 false))
            (doseq [n (drop 3 items)] (walk-method! ctx n)))
        (def-like-top? h top?)
        (do (walk! ctx hd false) (when a1 (walk-skip-sym! ctx a1)) (walk-all! (drop 2 items)))
        :else (walk-all! items)))))

(defn- form-record [form]
  (let [node (conv form)
        items (:items node)
        hd (first items)
        h (when (= :sym (:t hd)) (:sym hd))
        a1 (second items)
        locals (volatile! #{})
        refs (volatile! (sorted-set))]
    (collect-locals! locals node true)
    (walk! {:locals @locals :refs refs} node true)
    {:line (:line (meta form))
     :col (:column (meta form))
     :head (when h (str h))
     :name (when (and h (= :sym (:t a1)) (not (:tmpl a1))
                      (or (str/starts-with? (name h) "def") (= "ns" (name h))))
             (str (:sym a1)))
     :refs (vec @refs)}))

;; ---------------------------------------------------------------------------------------------
;; Files, namespaces, loading.

(def ^:private read-opts {:read-cond :allow :features #{:clj}})

(defn- ns-switch
  "The namespace symbol a top-level (ns x ...) / (in-ns 'x) form switches to, else nil."
  [form]
  (when (and (seq? form) (symbol? (first form)))
    (let [h (name (first form)) a (second form)]
      (cond
        (and (= h "ns") (symbol? a)) a
        (and (= h "in-ns") (seq? a) (= 'quote (first a)) (symbol? (second a))) (second a)))))

(defn- read-forms
  "Reads all top-level forms of `text`, binding *ns* as the file goes (following ns/in-ns),
  starting in `start-ns`. Calls (f form ns) for each form. `on-switch` is called with the
  namespace symbol when an ns/in-ns form is read and must return the Namespace (or throw)."
  [^String text start-ns on-switch f]
  (let [rdr (LineNumberingPushbackReader. (java.io.StringReader. text))
        eof (Object.)
        opts (assoc read-opts :eof eof)]
    (loop [cur start-ns]
      (let [form (binding [*ns* cur] (read opts rdr))]
        (when-not (identical? form eof)
          (f form cur)
          (recur (if-let [s (ns-switch form)] (on-switch s) cur)))))))

(def ^:private scratch-ns (create-ns 'formdb.ground-truth.scratch))

(defn- first-ns
  "The first namespace the file declares, or nil. Throws on read errors."
  [text]
  (let [found (volatile! nil)]
    (try
      (read-forms text scratch-ns
                  (fn [s] (vreset! found s) (throw (ex-info "found" {::found true})))
                  (fn [_ _]))
      (catch clojure.lang.ExceptionInfo e
        (when-not (::found (ex-data e)) (throw e))))
    @found))

(defn- one-line [^String s]
  (-> (or s "") str/trim (str/replace #"\s*\n\s*" " ")))

(defn- error-message [^Throwable t]
  (let [msgs (loop [t t acc []]
               (if t
                 (recur (.getCause t)
                        (conj acc (str (.getSimpleName (class t)) ": " (one-line (.getMessage t)))))
                 acc))]
    (str/join " <- " (distinct msgs))))

(def ^:private null-stream (PrintStream. (OutputStream/nullOutputStream)))

(defn- quietly
  "Runs f with stdout/stderr (Clojure's and Java's) discarded: loading libs prints warnings."
  [f]
  (let [out System/out err System/err]
    (try
      (System/setOut null-stream)
      (System/setErr null-stream)
      (binding [*out* (java.io.StringWriter.) *err* (java.io.StringWriter.)]
        (f))
      (finally
        (System/setOut out)
        (System/setErr err)))))

(defn- load-ns!
  "Requires namespace symbol s (from the classpath). Returns nil or an error message."
  [s]
  (try
    (quietly #(require s))
    (if (find-ns s) nil (str "namespace " s " not found after require"))
    (catch Throwable t (error-message t))))

(defn- source-files [^File root]
  (let [base (.toPath root)]
    (->> (file-seq root)
         (filter #(let [^File f %] (and (.isFile f) (re-find #"\.cljc?$" (.getName f)))))
         (map #(str/replace (str (.relativize base (.toPath ^File %))) File/separator "/"))
         sort)))

(defn- file-vars
  "Vars of the namespaces `nss` whose :file is this file (jar-relative path `jrel`)."
  [nss jrel]
  (->> (for [n nss :let [the-ns (find-ns n)] :when the-ns
             [sym ^Var v] (ns-interns the-ns)
             :let [m (meta v) f (:file m)]
             :when (and (string? f) (or (= f jrel) (str/ends-with? f (str "/" jrel))))
             :when (integer? (:line m))]
         {:name (str sym) :line (:line m)})
       (sort-by (juxt :line :name))
       vec))

(defn- analyze-file [root rel state]
  (let [{:keys [text ns error]} state
        jrel (subs rel (inc (str/index-of rel "/")))]
    (if error
      {:path rel :ns (some-> ns str) :load_error error :vars [] :forms []}
      (let [forms (volatile! [])
            nss (volatile! [ns])
            err (volatile! nil)]
        (try
          (read-forms text (the-ns 'user)
                      (fn [s]
                        (vswap! nss conj s)
                        (or (find-ns s)
                            (when-let [e (load-ns! s)] (throw (ex-info e {})))
                            (the-ns s)))
                      (fn [form cur]
                        (when (and (seq? form) (:line (meta form)) (:column (meta form)))
                          (vswap! forms conj (binding [*cur-ns* cur] (form-record form))))))
          (catch Throwable t (vreset! err (str "read error: " (error-message t)))))
        {:path rel :ns (str ns) :load_error @err
         :vars (file-vars (distinct @nss) jrel) :forms @forms}))))

;; ---------------------------------------------------------------------------------------------
;; JSON (hand-written: deterministic layout, no dependency).

(defn- json-str [^String s]
  (let [sb (StringBuilder. "\"")]
    (doseq [c s]
      (case c
        \" (.append sb "\\\"")
        \\ (.append sb "\\\\")
        \newline (.append sb "\\n")
        \return (.append sb "\\r")
        \tab (.append sb "\\t")
        (if (or (< (int c) 0x20) (> (int c) 0x7e))
          (.append sb (format "\\u%04x" (int c)))
          (.append sb c))))
    (str (.append sb "\""))))

(defn- json [x]
  (cond
    (nil? x) "null"
    (string? x) (json-str x)
    (integer? x) (str x)
    (map? x) (str "{" (str/join ", " (for [[k v] x] (str (json-str (name k)) ": " (json v)))) "}")
    (sequential? x) (str "[" (str/join ", " (map json x)) "]")
    :else (throw (ex-info (str "cannot write " (pr-str x)) {}))))

(defn- write-json [^Writer w version files]
  (.write w (str "{\"clojure_version\": " (json-str version) ",\n \"files\": ["))
  (doseq [[i f] (map-indexed vector files)]
    (.write w (str (when (pos? i) ",") "\n  {\"path\": " (json (:path f))
                   ", \"ns\": " (json (:ns f))
                   ", \"load_error\": " (json (:load_error f))
                   ",\n   \"vars\": ["))
    (.write w (str/join "," (map #(str "\n    " (json (array-map :name (:name %) :line (:line %))))
                                 (:vars f))))
    (.write w "],\n   \"forms\": [")
    (.write w (str/join "," (map #(str "\n    "
                                       (json (array-map :line (:line %) :col (:col %)
                                                        :head (:head %) :name (:name %)
                                                        :refs (:refs %))))
                                 (:forms f))))
    (.write w "]}"))
  (.write w "\n]}\n"))

;; ---------------------------------------------------------------------------------------------

(defn -main [& args]
  (when-not (= 2 (count args))
    (binding [*out* *err*]
      (println "usage: clojure -cp \"$(scripts/corpus.sh --classpath)\" tests/clojure/ground_truth.clj CORPUS_DIR OUT.json"))
    (System/exit 2))
  (let [[dir out] args
        root (File. ^String dir)
        _ (when-not (.isDirectory root)
            (binding [*out* *err*] (println "ground_truth: not a directory:" dir))
            (System/exit 2))
        rels (source-files root)
        ;; Phase 1: find each file's namespace and load it (in sorted file order).
        states (vec (for [rel rels]
                      (let [text (String. (Files/readAllBytes (.toPath (File. root ^String rel)))
                                          StandardCharsets/UTF_8)
                            ns (try (first-ns text) (catch Throwable t t))]
                        (cond
                          (instance? Throwable ns)
                          {:text text :error (str "read error: " (error-message ns))}
                          (nil? ns)
                          {:text text :error "no namespace: no top-level (ns ...) or (in-ns '...) form"}
                          :else {:text text :ns ns :error (load-ns! ns)}))))
        ;; Phase 2: analyze every loaded file against the final runtime state.
        files (mapv #(analyze-file root %1 %2) rels states)
        loaded (set (keep #(when-not (:load_error %) (:ns %)) files))
        failures (filter :load_error files)]
    (with-open [w (clojure.java.io/writer out :encoding "UTF-8")]
      (write-json w (clojure-version) files))
    (binding [*out* *err*]
      (println (format "ground_truth: %d files, %d namespaces loaded, %d load failures, %d vars, %d forms, %d refs"
                       (count files) (count loaded) (count failures)
                       (reduce + (map (comp count :vars) files))
                       (reduce + (map (comp count :forms) files))
                       (reduce + (for [f files fm (:forms f)] (count (:refs fm))))))))
  (shutdown-agents)
  (System/exit 0))

(try
  (apply -main *command-line-args*)
  (catch Throwable t
    (binding [*out* *err*]
      (println "ground_truth: fatal:" (error-message t)))
    (.printStackTrace t)
    (System/exit 1)))
