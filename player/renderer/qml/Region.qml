// One region of the screen and its layers, fixed and declared here: the idle cover, the still
// of a web view, two pictures, two videos; and the web views made for each navigation and the
// ticker or clock made for each show of one. One region per zone of the screen (Stage.qml):
// the main zone's, and one more for each other zone of the layout on screen.
//
// The region's layer stack (layerstack.py) decides the order of the layers and this file draws
// it: each layer's z is its place in the stack's `order`, from the back; a layer never raised
// is behind them all (z -1), at opacity 0: live but not drawn. The stack fades a layer in
// (Fade.qml, on the render thread). Layers of the same z are drawn in the order they are
// declared.
//
// `tile` is this panel's own part of the region: the whole region, or on a video wall the
// part of it on this panel's tile. The idle cover and the idle page are laid over the tile alone.
pragma ComponentBehavior: Bound
import QtQuick

Item {
    id: region

    // The region's layer stack (layerstack.py), set by Python as the region's player is made:
    // its `order` lists the layers raised so far, the one in front last; it asks for web views
    // (its signal viewWanted) and is handed them (its slot adopt). A Python object: `var`, as
    // QML cannot see its type.
    property var stack: null
    readonly property var order: stack ? stack.order : []
    property rect tile: Qt.rect(0, 0, width, height)

    readonly property Item cover: cover
    readonly property Item still: still
    readonly property Item pictureA: pictureA
    readonly property Item pictureB: pictureB
    readonly property Item videoA: videoA
    readonly property Item videoB: videoB

    Picture { id: pictureA; z: region.order.indexOf(pictureA); opacity: 0 }
    Picture { id: pictureB; z: region.order.indexOf(pictureB); opacity: 0 }
    Video { id: videoA; z: region.order.indexOf(videoA); opacity: 0; audio: false }
    Video { id: videoB; z: region.order.indexOf(videoB); opacity: 0; audio: false }
    Cover {
        id: cover
        z: region.order.indexOf(cover)
        opacity: 0
        visible: false
        anchors.fill: undefined
        x: region.tile.x
        y: region.tile.y
        width: region.tile.width
        height: region.tile.height
    }
    Still { id: still; z: region.order.indexOf(still); opacity: 0 }

    // The web view of one navigation: made when the stage asks, behind, not drawn until raised;
    // it ends with destroy() (deferred by QML: it may be handling one of its signals) or with
    // the scene.
    Component {
        id: webView
        WebView { id: view; z: region.order.indexOf(view); opacity: 0 }
    }
    Component {
        id: ownWebView
        WebView {
            id: ownView
            z: region.order.indexOf(ownView)
            opacity: 0
            anchors.fill: undefined
            x: region.tile.x
            y: region.tile.y
            width: region.tile.width
            height: region.tile.height
        }
    }
    // A ticker or a clock of the zone (zonelayer.py): made when the stack asks, behind, not
    // drawn until raised; destroyed as a web view is (onViewDropped).
    Component {
        id: tickerItem
        Ticker { id: ticker; z: region.order.indexOf(ticker); opacity: 0 }
    }
    Component {
        id: clockItem
        Clock { id: clock; z: region.order.indexOf(clock); opacity: 0 }
    }
    Connections {
        target: region.stack
        function onViewWanted(properties: var, own: bool) {
            region.stack.adopt((own ? ownWebView : webView).createObject(region, properties))
        }
        function onZoneItemWanted(kind: string, properties: var) {
            const made = kind === "ticker" ? tickerItem : kind === "clock" ? clockItem : null
            region.stack.adopt(made === null ? null : made.createObject(region, properties))
        }
        function onViewDropped(view: Item) { view.destroy() }
    }
}
